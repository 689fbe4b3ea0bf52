// Command metanode runs a peer-to-peer metadata node and talks to one.
//
//	metanode serve [flags]          run a node (HTTP API, swarm, file watcher)
//	metanode init | id | keygen     identity and keys, offline
//	metanode claim sign | claim put sign claims, post them to a node
//	metanode get | status | peers | trust …   ask a node over its HTTP API
//	metanode health | version       is a node serving; this binary's version
//	metanode invite | join CODE     pair two homes in one step
//	metanode import --from-redis URL | --from-sqlite FILE   move a home's metadata in
//	metanode bench verify | swarm   measure this machine or a loopback swarm
//
// The command contract (commands, flags, exit statuses 0/1/2) is cli.md;
// `metanode <command> --help` describes each. Configuration for serve comes
// from embedded defaults, a YAML file, METANODE_* (and upstream META_CORE_*,
// FILES_PATH) environment variables and flags, in increasing precedence.
//
// This package owns the command line, the configuration and the log handler;
// it imports node (to serve), api (its Client, for every client command) and
// store (to sign claims). Concurrency: main turns the first SIGINT/SIGTERM
// into a cancelled context (serve then closes the node gracefully), ignores
// signals within signalWindow of the first (one stop request delivered to the
// process and its group) and exits at once on a later one; commands otherwise run on the main goroutine.
package main
