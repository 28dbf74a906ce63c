package bench

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idemgen/idemgen/examples/payments/api"
)

// paymentBody is POST /payments's body in BenchmarkValidate (idem/idemvalidate).
const paymentBody = `{"amount":1999,"currency":"EUR","description":"Order #1042"}`

// BenchmarkBodyDecode is #26 item 1's question: a JSON body is decoded twice per request,
// by the validation (idemvalidate: into any, numbers as json.Number, which openapi3's
// VisitJSON checks) and by the binding (oapi-codegen's runtime.BindJSONBody: into the
// operation's typed body, which the handler and the fingerprint take); would sharing one
// decode cost less? Sharing means building the typed body from the validation's tree,
// which encoding/json only does through JSON again: the "shared" case, against which the
// binding's own decode is the cost it would replace. (A reflection mapper from the tree to
// the struct, github.com/go-viper/mapstructure/v2 with the json tags, is the other way;
// it skips the types' UnmarshalJSON methods, openapi_types.Date and the unions' among
// them, so it would bind some bodies differently.)
func BenchmarkBodyDecode(b *testing.B) {
	body := []byte(paymentBody)
	b.Run("validation (any)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeAny(b, body)
		}
	})
	b.Run("binding (typed)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p api.CreatePaymentJSONRequestBody
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
	tree := decodeAny(b, body)
	b.Run("shared (typed from the tree)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, err := json.Marshal(tree)
			if err != nil {
				b.Fatal(err)
			}
			var p api.CreatePaymentJSONRequestBody
			if err := json.Unmarshal(data, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func decodeAny(b *testing.B, body []byte) any {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b.Fatal(err)
	}
	return v
}
