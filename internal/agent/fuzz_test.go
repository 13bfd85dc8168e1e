package agent

import (
	"os"
	"strings"
	"testing"
)

// FuzzLoad: any agent file either loads into a definition that validates
// or is refused with problems that each name the file; nothing panics.
func FuzzLoad(f *testing.F) {
	f.Add(minimal)
	if data, err := os.ReadFile("testdata/design-example.yaml"); err == nil {
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, src string) {
		d, err := Load(strings.NewReader(src), "agents/f.yaml")
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "agents/f.yaml: ") {
					t.Fatalf("problem without the file name: %q", line)
				}
			}
			return
		}
		if verr := d.Validate(); verr != nil {
			t.Fatalf("loaded a definition that does not validate: %v", verr)
		}
	})
}
