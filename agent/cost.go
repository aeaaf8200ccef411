package agent

import (
	"errors"
	"fmt"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/llm"
)

// errCostLimit ends a loop whose next call would go over a cost cap; the
// loop's status and its cost_limit event are already set.
var errCostLimit = errors.New("cost limit")

// primary returns the provider and model of the first target of the chain.
func (l *loop) primary() (provider, model string) {
	model = l.cfg.Request.Model
	if len(l.cfg.Chain) > 0 {
		provider = l.cfg.Chain[0].Provider.Name()
		if l.cfg.Chain[0].Model != "" {
			model = l.cfg.Chain[0].Model
		}
	}
	return provider, model
}

// priceOf returns the price of a call to model through provider; the mock
// is free.
func (l *loop) priceOf(provider, model string) (llm.Price, bool) {
	if provider == llm.ProviderMock {
		return llm.Price{}, true
	}
	return l.cfg.Prices.Lookup(model)
}

// capped reports whether any budget has a cap.
func (l *loop) capped() bool {
	for _, b := range l.cfg.Budgets {
		if b.MaxUSD > 0 {
			return true
		}
	}
	return false
}

// checkPriced fails a capped loop whose model has no price: a cap that
// cannot be checked is no cap.
func (l *loop) checkPriced() error {
	if !l.capped() {
		return nil
	}
	provider, model := l.primary()
	if _, ok := l.priceOf(provider, model); !ok {
		return fmt.Errorf("a cost cap needs the price of model %q, which the price table does not have (give it with --prices FILE)", model)
	}
	return nil
}

// checkBudgets is the check before egress: the request's input tokens,
// estimated, priced at the primary model's input price, must fit every
// budget's cap. When one does not, it logs a cost_limit event, sets the
// status and returns errCostLimit.
func (l *loop) checkBudgets(req *llm.Request) error {
	if !l.capped() {
		return nil
	}
	provider, model := l.primary()
	price, _ := l.priceOf(provider, model)
	tokens := compact.EstimateTokens(req.Messages) + compact.EstimateText(req.System)
	next := price.Cost(llm.Usage{InputTokens: tokens})
	for _, b := range l.cfg.Budgets {
		if b.Allows(next) {
			continue
		}
		spent, _ := b.Spent()
		l.res.Status, l.costStopped = StatusBudgetExhausted, true
		if err := l.event(EventCostLimit, map[string]any{"max_cost_usd": b.MaxUSD, "spent_usd": spent, "next_call_usd": next, "model": model}); err != nil {
			return err
		}
		return errCostLimit
	}
	return nil
}

// account prices a reply (by the provider and model that answered, the
// requested model when the reply names none), adds it to the result and
// the budgets, and returns the cost and whether it is known.
func (l *loop) account(resp *llm.Response, requested string) (float64, bool) {
	model := resp.Model
	if model == "" {
		model = requested
	}
	price, known := l.priceOf(resp.Provider, model)
	cost := price.Cost(resp.Usage)
	if known {
		l.res.CostUSD += cost
	} else {
		l.res.CostKnown = false
	}
	for _, b := range l.cfg.Budgets {
		b.Add(cost, known)
	}
	return cost, known
}
