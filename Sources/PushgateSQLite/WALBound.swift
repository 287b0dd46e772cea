/// How large the write-ahead log may grow before the store checkpoints it back into the database and
/// truncates it. Pure: the caller measures the files and the volume.
///
/// SQLite appends every commit's pages to the WAL and copies them into the database at a checkpoint;
/// until then the WAL only grows. The store used to checkpoint every 1 GiB (fewer copies of the
/// registry's shared index pages, docs/benchmarks.md); on a small volume that WAL filled the disk, and a
/// full disk cannot be checkpointed (a checkpoint copies pages into the database, which must have room
/// for them). So the bound is the smaller of:
/// - ``limitBytes`` (`walLimitBytes`, 64 MiB), or half of the database once that is larger: a registry
///   of millions still checkpoints rarely enough to copy most shared pages once, and disk use stays
///   within 1.5 times the database plus the limit (plus one batch, written before the check);
/// - a quarter of the room the WAL could still use (the volume's free space plus the WAL itself), so
///   that the checkpoint that empties it finds room for the pages it copies, whatever else fills the
///   volume;
/// and never below ``smallestBytes`` (a nearly full volume still lets a batch through and checkpoints
/// after it, rather than after every commit).
struct WALBound: Sendable, Equatable {
    var limitBytes: Int64

    static let smallestBytes: Int64 = 1 << 20

    /// What the store measured: the database file, the WAL file and the volume's free space, in bytes.
    struct Measure: Sendable, Equatable {
        var mainBytes: Int64
        var walBytes: Int64
        var freeBytes: Int64
    }

    func bytes(for measure: Measure) -> Int64 {
        let scaled = max(limitBytes, measure.mainBytes / 2)
        let room = max(0, measure.freeBytes) + max(0, measure.walBytes)
        return max(Self.smallestBytes, min(scaled, room / 4))
    }

    /// After a commit: checkpoint and truncate once the WAL has reached the bound.
    func checkpointsAfterCommit(_ measure: Measure) -> Bool {
        measure.walBytes >= bytes(for: measure)
    }

    /// At a maintenance round: a WAL that has not grown since the last round (nothing written, or only
    /// transactions that changed nothing, such as the dispatcher's idle polls) is checkpointed and
    /// truncated whatever its size, so a quiet store takes only its database's room. After a truncation the
    /// WAL grows from zero with every commit that changes anything, so a busy writer is never taken for an
    /// idle one for long (at worst one extra checkpoint a round).
    static func checkpointsWhenIdle(_ measure: Measure, walBytesAtLastRound: Int64) -> Bool {
        measure.walBytes > 0 && measure.walBytes == walBytesAtLastRound
    }
}
