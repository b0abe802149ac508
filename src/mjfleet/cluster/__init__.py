"""The hosts of a multi-node run: names and addresses, the launcher's routable address, SSH pre-flight checks."""
