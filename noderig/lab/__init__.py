"""The lab: real stand-ins for the parts that need GPUs or the internet (Hub, hosts, packages, server)."""
