"""The file storage, the embedded default: request records, the queue and the inbox as files
in the workspace folder, under locks, written atomically."""
