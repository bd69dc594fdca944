"""The fault harness: the whole system as hosts in network namespaces on one machine, a
workload, faults drawn from a seed, and a checker (README: Faults across hosts)."""
