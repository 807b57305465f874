"""Stage 5, execution: one :class:`~thinwan.execute.executors.Executor` protocol (local
processes, a Dask cluster, the namespace lab one run at a time) behind ``thinwan run``,
``thinwan sweep`` and ``thinwan lab run``; the Parquet sweep dataset and its resume."""
