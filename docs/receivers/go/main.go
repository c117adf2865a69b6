// A Hookline receiver in Go with the Standard Webhooks library
// (module github.com/standard-webhooks/standard-webhooks/libraries, package go).
// Run: WEBHOOK_SECRET=whsec_... PORT=8000 go run .
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

type event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

func emit(record map[string]any) {
	line, _ := json.Marshal(record)
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	// The same value as in the subscription's Secret (whsec_<base64>). While a subscription
	// rotates, requests carry two signatures and either secret verifies.
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal(err)
	}
	// Hookline sends each event at least once, with the same webhook-id on every retry and replay.
	var mu sync.Mutex
	seen := map[string]time.Time{}

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// Checks the signature and that webhook-timestamp is within 5 minutes of now.
		if err := wh.Verify(body, r.Header); err != nil {
			// 401 when unsigned, 403 when signed wrong or too long ago. Any 4xx but 408, 410 and 429
			// dead-letters at once (PermanentFailure): fix the secret, then replay.
			status := http.StatusForbidden
			if r.Header.Get("webhook-signature") == "" {
				status = http.StatusUnauthorized
			}
			w.WriteHeader(status)
			emit(map[string]any{"rejected": err.Error()})
			return
		}
		var ev event
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		for k, at := range seen {
			if time.Since(at) > 24*time.Hour {
				delete(seen, k)
			}
		}
		_, duplicate := seen[id]
		seen[id] = time.Now()
		mu.Unlock()
		if duplicate {
			w.WriteHeader(http.StatusOK) // already processed: acknowledge it again
			emit(map[string]any{"duplicate": id})
			return
		}
		w.WriteHeader(http.StatusNoContent) // answer quickly; do slow work afterwards
		emit(map[string]any{"received": id, "type": ev.Type, "data": ev.Data})
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	emit(map[string]any{"listening": true})
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
