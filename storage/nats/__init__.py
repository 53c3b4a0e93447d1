"""The NATS JetStream storage (docs/scaling.md): records as stream messages and KV heads, the
queue as a work-queue stream, the inbox as a KV bucket, for teams spread over several hosts."""
