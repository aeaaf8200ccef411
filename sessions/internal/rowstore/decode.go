package rowstore

import (
	"fmt"
	"runtime"
	"sync"
)

// DecodeBatch is how many JSON bodies make one decoding job.
const DecodeBatch = 1024

// Decoder decodes the stored JSON bodies of n items (messages, or event
// data) while they are still being read: Add copies bodies into a batch,
// and full batches are decoded by worker goroutines (one per CPU), so a
// long session's JSON decoding, most of the cost of loading it, runs on
// every core and overlaps the reading. A load smaller than one batch is
// decoded on the caller's goroutine.
type Decoder struct {
	what   string // what an item is, for errors: "message", "event"
	n      int
	decode func(i int, body []byte) error // decodes item i; called once per item
	batch  decodeJob
	jobs   chan decodeJob
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error // the first decoding error, by position
	at  int
}

// decodeJob is bodies back to back in buf: body k is item items[k] and
// ends at ends[k].
type decodeJob struct {
	items []int
	ends  []int
	buf   []byte
}

// NewDecoder returns a decoder of n items (messages or events, as what
// says) that decode decodes. decode runs on several goroutines at once,
// for distinct items.
func NewDecoder(what string, n int, decode func(i int, body []byte) error) *Decoder {
	d := &Decoder{what: what, n: n, decode: decode}
	if n > DecodeBatch {
		workers := min(runtime.GOMAXPROCS(0), (n+DecodeBatch-1)/DecodeBatch)
		d.jobs = make(chan decodeJob, workers)
		for range workers {
			d.wg.Go(func() {
				for job := range d.jobs {
					d.run(job)
				}
			})
		}
	}
	return d
}

// Add queues body (which it copies) as item i's; each item is added at
// most once.
func (d *Decoder) Add(i int, body []byte) {
	d.batch.items = append(d.batch.items, i)
	d.batch.buf = append(d.batch.buf, body...)
	d.batch.ends = append(d.batch.ends, len(d.batch.buf))
	if len(d.batch.ends) == DecodeBatch {
		d.flush()
	}
}

// flush hands the current batch to a worker, or decodes it now when there
// are none.
func (d *Decoder) flush() {
	if len(d.batch.ends) == 0 {
		return
	}
	if d.jobs == nil {
		d.run(d.batch)
		d.batch = decodeJob{items: d.batch.items[:0], ends: d.batch.ends[:0], buf: d.batch.buf[:0]}
		return
	}
	d.jobs <- d.batch
	d.batch = decodeJob{}
}

func (d *Decoder) run(job decodeJob) {
	start := 0
	for k, end := range job.ends {
		i := job.items[k]
		if err := d.decode(i, job.buf[start:end]); err != nil {
			d.mu.Lock()
			if d.err == nil || i < d.at {
				d.err, d.at = err, i
			}
			d.mu.Unlock()
		}
		start = end
	}
}

// Wait decodes what is left, waits for the workers and returns the first
// decoding error.
func (d *Decoder) Wait() error {
	d.flush()
	if d.jobs != nil {
		close(d.jobs)
		d.wg.Wait()
	}
	if d.err != nil {
		return fmt.Errorf("%s %d: %w", d.what, d.at, d.err)
	}
	return nil
}
