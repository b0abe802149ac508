"""Where and how this process runs: devices, its rank and process group, stop signals."""
