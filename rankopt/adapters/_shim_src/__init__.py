"""C sources of the PMPI shim, its wrapper table and generator (see rankopt.adapters.shim)."""
