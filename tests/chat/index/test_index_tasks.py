def test_vector_index_sync_task_logs_counts_only(db, caplog):
    from chat.index.tasks import vector_indexes_sync_task

    with caplog.at_level("INFO", logger="chat.index.tasks"):
        vector_indexes_sync_task.delay()
    assert "vector indexes: 0 created, 0 rebuilt, 0 dropped" in caplog.messages
