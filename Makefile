# metanode: build, run, test. Only Go is needed (CGO off: pure-Go SQLite).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit and its time (UTC), not the time of the build: two builds of one
# commit are the same bytes (reproducible; SOURCE_DATE_EPOCH overrides).
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE    ?= $(shell if [ -n "$$SOURCE_DATE_EPOCH" ]; then date -u -d "@$$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ; \
             else TZ=UTC0 git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null; fi)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
BIN     ?= bin/metanode
# make release: one static binary per platform and SHA256SUMS, in DIST.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64 windows/amd64
DIST      ?= dist
IMAGE     ?= metanode
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10s

.PHONY: build release image run test check bench fuzz screenshots clean

## build: a static binary in bin/, version stamped
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/metanode

## release: static, reproducible binaries for PLATFORMS and their SHA-256
## checksums in DIST (metanode-VERSION-OS-ARCH[.exe], SHA256SUMS)
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		out=$(DIST)/metanode-$(VERSION)-$$os-$$arch$$ext; echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/metanode; \
	done
	cd $(DIST) && sha256sum metanode-* > SHA256SUMS && cat SHA256SUMS

## image: the multi-arch container image (docker buildx; IMAGE_PLATFORMS)
image:
	docker buildx build -f configs/Dockerfile --platform $(IMAGE_PLATFORMS) \
		--build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg DATE=$(DATE) \
		-t $(IMAGE):$(VERSION) .

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

## screenshots: the owner's page, each screen desktop and 360 px wide (light
## and dark), driven in headless Chromium against two real nodes, into docs/ui/
screenshots:
	mkdir -p docs/ui
	METANODE_SCREENSHOTS=$(CURDIR)/docs/ui go test ./node/ -run '^TestUI_OwnersPage$$' -count=1

clean:
	rm -rf bin $(DIST)
