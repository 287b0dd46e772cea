import Foundation
import GRDB
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The store's files and the room left on their volume, and the checkpoints that keep the WAL within
/// ``WALBound``.
extension SQLiteStore {
    /// The database's files and its volume, as measured now.
    public struct DiskUse: Sendable, Equatable {
        /// The database file (`pushgate_store_bytes{file="main"}`).
        public var databaseBytes: Int64
        /// The write-ahead log (`pushgate_store_bytes{file="wal"}`); 0 when it does not exist.
        public var walBytes: Int64
        /// Free space on the database's volume for an unprivileged process (statvfs `f_bavail`); -1 if
        /// it could not be read.
        public var freeBytes: Int64
        /// `store.minimumFreeBytes`.
        public var minimumFreeBytes: Int64

        /// Less free space than `store.minimumFreeBytes`: time to warn, before writes fail.
        public var isLow: Bool { freeBytes >= 0 && freeBytes < minimumFreeBytes }
    }

    /// Measures the files and the volume (three system calls, no database access).
    public func diskUse() -> DiskUse {
        DiskUse(
            databaseBytes: Self.fileSize(path),
            walBytes: Self.fileSize(path + "-wal"),
            freeBytes: Self.freeBytes(onVolumeOf: path),
            minimumFreeBytes: minimumFreeBytes
        )
    }

    /// One maintenance round, which the gateway runs about once a second: if the WAL has not grown since
    /// the last round, it is checkpointed into the database and truncated (a quiet store takes only its
    /// database's room); a WAL still past its bound (readers kept the last checkpoint from finishing) is
    /// checkpointed too. Returns the disk use afterwards.
    public func maintain() async -> DiskUse {
        let use = diskUse()
        guard (try? ensureRunning()) != nil else { return use }
        let previous = walBytesAtLastRound.withLock { seen in
            defer { seen = use.walBytes }
            return seen
        }
        let measure = WALBound.Measure(use)
        if WALBound.checkpointsWhenIdle(measure, walBytesAtLastRound: previous) {
            await checkpointWAL(reason: "idle", mode: .truncate)
        } else if walBound.checkpointsAfterCommit(measure) {
            await checkpointWAL(reason: "bound", mode: .restart, keepingBytes: walBound.bytes(for: measure))
        } else {
            return use
        }
        let after = diskUse()
        walBytesAtLastRound.withLock { $0 = after.walBytes }
        return after
    }

    /// After every commit: checkpoint once the WAL reaches its bound.
    func committed() async {
        let measure = WALBound.Measure(diskUse())
        if walBound.checkpointsAfterCommit(measure) {
            await checkpointWAL(reason: "bound", mode: .restart, keepingBytes: walBound.bytes(for: measure))
        }
    }

    /// After a failed write: on a full volume, a checkpoint may still empty the WAL (when its pages fit in
    /// the database's existing pages) and give the room back; otherwise it fails like the write did, and the
    /// next write or round tries again.
    func writeFailed(_ error: DatabaseError) async {
        if error.resultCode == .SQLITE_FULL { await checkpointWAL(reason: "full", mode: .truncate) }
    }

    /// Copies the WAL into the database, on the writer connection, between two writes. `.truncate` (idle, or
    /// a full volume) cuts the WAL file to zero bytes. `.restart` (a busy writer past the bound) lets the
    /// next commit write the WAL from its start again, in the file's existing blocks: a file cut to zero
    /// and grown again at every bound allocated its blocks anew each time, which cost registrations at
    /// 5,000,000 measurably; `journal_size_limit` is set to the bound first, so the file is cut back to it
    /// when the WAL starts over (it shrinks with the volume's room). It waits for readers on older
    /// snapshots at most
    /// ``checkpointBusyMilliseconds``, not the writer's busy timeout: a busy checkpoint copies what it can
    /// and leaves the rest to the next one, rather than stall the writes queued behind it.
    func checkpointWAL(reason: String, mode: Database.CheckpointMode, keepingBytes: Int64? = nil) async {
        guard checkpointing.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            return
        }
        defer { checkpointing.store(false, ordering: .releasing) }
        let pool = pool
        let restore = busyTimeoutMilliseconds
        // In a task of its own, as in `writeUnsynced`: a cancelled caller must not cancel the statement that
        // puts the busy timeout back.
        let outcome = await Task {
            try await pool.writeWithoutTransaction { db in
                if let keepingBytes { try db.execute(sql: "PRAGMA journal_size_limit = \(keepingBytes)") }
                try db.execute(sql: "PRAGMA busy_timeout = \(Self.checkpointBusyMilliseconds)")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = \(restore)") }
                return try db.checkpoint(mode)
            }
        }.result
        switch outcome {
        case .success(let frames):
            logger.debug(
                "WAL checkpointed",
                metadata: ["store.reason": "\(reason)", "store.wal_frames": "\(frames.walFrameCount)"]
            )
        case .failure(let error):
            let reasonText = (error as? DatabaseError).map(Self.describe) ?? "\(error)"
            logger.debug(
                "WAL checkpoint incomplete",
                metadata: ["store.reason": "\(reason)", "store.error": "\(reasonText)"]
            )
        }
    }

    /// How long a checkpoint waits for readers still on an older snapshot.
    static let checkpointBusyMilliseconds = 200

    static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return Int64(info.st_size)
    }

    static func freeBytes(onVolumeOf path: String) -> Int64 {
        let folder = (path as NSString).deletingLastPathComponent
        var info = statvfs()
        guard statvfs(folder.isEmpty ? "." : folder, &info) == 0 else { return -1 }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }
}

extension WALBound.Measure {
    init(_ use: SQLiteStore.DiskUse) {
        self.init(mainBytes: use.databaseBytes, walBytes: use.walBytes, freeBytes: use.freeBytes)
    }
}
