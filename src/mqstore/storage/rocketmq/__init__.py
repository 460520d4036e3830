"""Storage of the RocketMQ layout: CommitLog, ConsumeQueue, IndexFile/IndexService, checkpoint,
dispatch, recovery, flush and retention."""
