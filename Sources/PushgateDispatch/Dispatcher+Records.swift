import PushgateCore

/// Group commit of progress: the records of chunks that fall due while a record is being written go
/// together in the next store transaction (``DeliveryLedger/recordProgress(batch:)``), each with its own
/// lease check, so that many one-device requests finishing at once share one commit and one fsync.
extension Dispatcher {
    /// Records a chunk's progress with whatever other chunks' records wait, and answers once the
    /// transaction that holds it has ended.
    func recordProgress(_ progress: ChunkProgress) async throws -> ProgressResult {
        let lease = LeaseWindow(
            owner: configuration.instanceID,
            now: clock.now(),
            duration: configuration.leaseDuration
        )
        let store = self.store
        let answers = await progressRecords.submit([ProgressRecord(progress, renewing: lease)]) { records in
            await store.recordProgress(batch: records)
        }
        return try answers[0].get()
    }
}
