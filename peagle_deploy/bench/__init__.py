"""`peagle bench` and `peagle metrics`: load generator, datasets, acceptance, cost, reports.

Modules (each small, imported lazily by the CLI):
- loadgen: the closed-loop level runner (transport-agnostic); records: what a request and a level record,
  aggregate: a level's figures folded in constant memory;
- http_sender / sagemaker_sender: transports for URL targets and SageMaker endpoints (counting with runtime.sse.ChunkTally);
- datasets, stats, acceptance (CloudWatch log parser, Prometheus diff), cost, advisor (K);
- results (versioned JSON schema), compare, report (Markdown / Rich), plot (PNG), runner (one run).

The known-truth SSE server that calibrates the load generator is a test double: testing/paced_server.py.
"""
