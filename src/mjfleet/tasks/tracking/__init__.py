"""Motion tracking: a humanoid follows a reference motion read from a file (:mod:`.motion`)."""
