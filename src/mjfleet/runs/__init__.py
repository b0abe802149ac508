"""The run as a record: its identity (the job and the fingerprint of its settings), its ``job.json``, its directory,
where it starts and where a checkpoint comes from, and how it ended.

Nothing here knows how workers are started: the training flow (:mod:`mjfleet.train`) and the commands read and write
runs through these modules.
"""
