package serve

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3 document of the routes (a test keeps it
// in step with the route table).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI handles GET /openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
	return nil
}
