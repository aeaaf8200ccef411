package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkLoopbackFloor is the floor BenchmarkConcurrentLoops is
// measured against: the same 200 clients making two sequential streamed
// requests each to the same fake server, with plain net/http and no
// skein. The difference between the two wall times is skein's cost.
func BenchmarkLoopbackFloor(b *testing.B) {
	fake := newFakeOpenAI(100 * time.Millisecond)
	defer fake.Close()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	client := &http.Client{Transport: t}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	var total time.Duration
	for i := -1; i < b.N; i++ { // round -1 warms the connection pool, untimed
		start := time.Now()
		var wg sync.WaitGroup
		for j := 0; j < 200; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 2; k++ {
					req, _ := http.NewRequest("POST", fake.URL+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+fakeKey)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					buf := make([]byte, 4096)
					for {
						if _, err := resp.Body.Read(buf); err != nil {
							break
						}
					}
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		if i >= 0 {
			total += time.Since(start)
		}
	}
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s-wall")
}
