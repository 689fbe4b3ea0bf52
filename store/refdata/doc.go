// Package refdata owns the reference data that tests, benchmarks and
// `metanode bench` share: deterministic signers and cids (the same keys and
// ids in every run), parallel signing, and the reference dataset (the
// million-claim fixture), generated once and cached on disk under
// os.UserCacheDir()/metanode-bench/. It does not import testing, so the
// binary can use it; store/storetest wraps it for tests.
//
// Concurrency: every function is safe for concurrent use; Claims and Sign
// sign on all cores and return when done. Load writes the cache file
// atomically (temporary file, then rename), so concurrent processes at
// worst both generate it.
package refdata
