"""Work on a host beyond single commands: detached processes (engines) and the remote benchmark."""
