// A receiver for subscriptions with signature.scheme HMACSHA256Hex, with the standard library
// only: x-webhook-signature is sha256=<hex HMAC-SHA256 of "<x-webhook-timestamp>.<raw body>">.
// The key is the Secret's value as UTF-8 bytes (a whsec_<base64> value: its decoded bytes).
// Run: WEBHOOK_SECRET=... PORT=8000 go run ./hmachex
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const tolerance = 5 * time.Minute

func keyOf(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			log.Fatal("WEBHOOK_SECRET starts with whsec_ but the rest is not base64")
		}
		return key
	}
	return []byte(secret)
}

// VerifyHooklineHex is the helper: true when the request was signed by Hookline with one of
// keys less than `tolerance` ago. List the old and the new secret while you rotate (Hookline
// signs HMACSHA256Hex with the current one only).
func VerifyHooklineHex(body []byte, header http.Header, keys [][]byte, now time.Time) bool {
	timestamp := header.Get("x-webhook-timestamp")
	signature := header.Get("x-webhook-signature")
	seconds, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || seconds < 0 || strings.TrimLeft(timestamp, "0123456789") != "" {
		return false
	}
	// The timestamp is signed: an old request (captured, then sent again) is refused.
	if age := now.Sub(time.Unix(seconds, 0)); age > tolerance || age < -tolerance {
		return false
	}
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(timestamp + "."))
		mac.Write(body)
		expected := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		// Constant time: how much of a guess matches must not show in the time the answer takes.
		if hmac.Equal([]byte(signature), []byte(expected)) {
			return true
		}
	}
	return false
}

func emit(record map[string]any) {
	line, _ := json.Marshal(record)
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	keys := [][]byte{keyOf(os.Getenv("WEBHOOK_SECRET"))}
	if previous := os.Getenv("WEBHOOK_PREVIOUS_SECRET"); previous != "" {
		keys = append(keys, keyOf(previous))
	}
	var mu sync.Mutex
	seen := map[string]bool{} // processed x-webhook-id values (a database in production)

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Verify the raw bytes as received: re-serialized JSON would not match the signature.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// 401 when unsigned, 403 when signed wrong or too long ago. Either (any 4xx but 408, 410,
		// 429) makes Hookline dead-letter it at once (PermanentFailure): fix the secret, then replay.
		if r.Header.Get("x-webhook-signature") == "" || r.Header.Get("x-webhook-timestamp") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			emit(map[string]any{"rejected": "no signature or timestamp"})
			return
		}
		if !VerifyHooklineHex(body, r.Header, keys, time.Now()) {
			w.WriteHeader(http.StatusForbidden)
			emit(map[string]any{"rejected": "bad signature or timestamp"})
			return
		}
		var ev struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := r.Header.Get("x-webhook-id")
		mu.Lock()
		duplicate := seen[id]
		seen[id] = true
		mu.Unlock()
		if duplicate {
			w.WriteHeader(http.StatusOK) // already processed: acknowledge it again
			emit(map[string]any{"duplicate": id})
			return
		}
		w.WriteHeader(http.StatusNoContent)
		emit(map[string]any{"received": id, "type": ev.Type, "data": ev.Data})
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "8000"
	}
	emit(map[string]any{"listening": true})
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
