/// A store operation that could not be carried out: a rule of the registry or the ledger was broken
/// (an unknown group, a duplicate request id) or the backend failed.
///
/// Equality is on the code only, so callers and tests match on `StoreError.unknownGroup` without
/// repeating message text. `description` is safe to log (group names and request ids, never payloads).
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable code. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A group the app does not have: listed, or a notification request whose groups are all unknown
        /// and that names no device. Nothing of the request was stored.
        public static let unknownGroup = Code("unknown_group")
        /// A notification request names neither a group nor a device.
        public static let noTargets = Code("no_targets")
        /// A notification request reuses the id of a stored one.
        public static let duplicateRequestID = Code("duplicate_request_id")
        /// A notification request carries the idempotency key of a request stored for the same app within
        /// ``IdempotencyKey/window``, with another fingerprint: a different request under a key already
        /// used. Nothing was stored.
        public static let idempotencyKeyReused = Code("idempotency_key_reused")
        /// An argument breaks the operation's contract (negative limit, empty app or group name...).
        public static let invalidArgument = Code("invalid_argument")
        /// Another live process holds this instance id (see ``InstanceLeases``).
        public static let instanceIDInUse = Code("instance_id_in_use")
        /// The backend failed (I/O error, corrupt row). `debugDescription` carries the backend's message.
        public static let backend = Code("backend")
    }

    public let code: Code
    /// A human sentence, safe to log.
    public let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public static func unknownGroup(app: String, group: String) -> StoreError {
        StoreError(code: .unknownGroup, message: "app \"\(app)\" has no group \"\(group)\"")
    }

    public static func noTargets() -> StoreError {
        StoreError(code: .noTargets, message: "a notification request needs at least one group or device")
    }

    public static func duplicateRequestID(_ id: RequestID) -> StoreError {
        StoreError(code: .duplicateRequestID, message: "a notification request with id \(id) already exists")
    }

    /// The key is not quoted: it is the client's, and messages end up in logs.
    public static func idempotencyKeyReused(app: String) -> StoreError {
        StoreError(
            code: .idempotencyKeyReused,
            message:
                "app \"\(app)\" has a different notification request under this idempotency key (keys name one request for 24 h)"
        )
    }

    public static func invalidArgument(_ message: String) -> StoreError {
        StoreError(code: .invalidArgument, message: message)
    }

    /// `count` (a page size, a chunk size), which must be at least one; ``Code/invalidArgument`` otherwise.
    package static func positive(_ count: Int, _ name: String = "limit") throws(StoreError) -> Int {
        guard count > 0 else { throw StoreError.invalidArgument("\(name) must be positive (got \(count))") }
        return count
    }

    public static func instanceIDInUse(_ id: InstanceID) -> StoreError {
        StoreError(
            code: .instanceIDInUse,
            message: "instance id \"\(id)\" is held by another live process: give each instance its own id"
        )
    }

    public static func backend(_ message: String) -> StoreError {
        StoreError(code: .backend, message: message)
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
