module github.com/metanode/metanode

go 1.26.6

require (
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.4.1
	github.com/google/uuid v1.6.0
	github.com/ipfs/go-cid v0.6.2
	github.com/mr-tron/base58 v1.3.0
	github.com/multiformats/go-multihash v0.2.3
)

require (
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	github.com/minio/sha256-simd v1.0.1 // indirect
	github.com/multiformats/go-base32 v0.1.0 // indirect
	github.com/multiformats/go-base36 v0.2.0 // indirect
	github.com/multiformats/go-multibase v0.3.0 // indirect
	github.com/multiformats/go-varint v0.1.0 // indirect
	github.com/spaolacci/murmur3 v1.1.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	lukechampine.com/blake3 v1.4.1 // indirect
)
