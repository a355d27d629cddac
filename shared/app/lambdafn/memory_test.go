package lambdafn

import "testing"

func TestMemoryLimitIsThreeEighthsOfTheFunctionMemory(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want int64
	}{
		{"512 MB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 192 << 20},
		{"GOMEMLIMIT wins", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "100MiB"}, 0},
		{"not in Lambda", map[string]string{}, 0},
		{"garbled size", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if got := memoryLimit(lookup); got != tt.want {
				t.Errorf("memoryLimit = %d, want %d", got, tt.want)
			}
		})
	}
}
