# metanode: build, run, test. Only Go is needed (CGO off: pure-Go SQLite).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     ?= bin/metanode
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10s

.PHONY: build run test check bench fuzz clean

## build: a static binary in bin/, version stamped
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/metanode

## run: a node on embedded defaults (the README's run command)
run:
	go run ./cmd/metanode serve

## test: every package under the race detector (the README's test command; CI runs exactly this)
test:
	go test -race ./...

## check: formatting, vet and staticcheck (staticcheck is fetched by go run)
check:
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...

## bench: the benchmarks, once each, and this machine's verification limit
bench:
	go run ./cmd/metanode bench verify
	go test -run '^$$' -bench . -benchtime 1x ./...

## fuzz: each fuzz target for FUZZTIME (default 10s)
fuzz:
	@set -e; for pkg in $$(go list ./...); do \
		for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

clean:
	rm -rf bin
