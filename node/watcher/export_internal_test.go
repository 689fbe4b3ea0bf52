package watcher

// DirOpens is how many directories w has opened by name so far (each
// from its parent's handle): what its walks and path checks cost.
func DirOpens(w *Watcher) int64 { return w.dirOpens.Load() }
