/// How the stores write ledger values into columns and read them back: one definition, so that an
/// SQLite file and a PostgreSQL schema hold the same codes, and the two stores cannot drift apart.
public enum StoredForm {
    /// `request.state`.
    public enum RequestStateCode: Int64, Sendable {
        case queued = 0
        case sending = 1
        case done = 2
        case expired = 3

        public var state: RequestState {
            switch self {
            case .queued: .queued
            case .sending: .sending
            case .done: .done
            case .expired: .expired
            }
        }
    }

    public static func requestState(_ raw: Int64) -> RequestState {
        (RequestStateCode(rawValue: raw) ?? .queued).state
    }

    /// NULL: storage policy (header omitted); 0: immediately; otherwise UNIX seconds.
    public static func expiration(_ expiration: Expiration) -> Int64? {
        switch expiration {
        case .storagePolicy: nil
        case .immediately: 0
        case .at(let seconds): seconds
        }
    }

    public static func expiration(stored: Int64?) -> Expiration {
        guard let stored else { return .storagePolicy }
        return stored == 0 ? .immediately : .at(epochSeconds: stored)
    }

    /// A request id read back from the database (written from a validated ``RequestID``).
    public static func requestID(_ raw: String) throws -> RequestID {
        do {
            return try RequestID(raw)
        } catch {
            throw StoreError.backend("stored request id is malformed: \(error.message)")
        }
    }

    /// `chunk.state`. SQL strings interpolate these codes instead of spelling the numbers.
    public enum ChunkStateCode: Int64, Sendable {
        case open = 0
        case done = 1
    }

    /// `chunk.kind`.
    public enum ChunkKindCode: Int64, Sendable {
        case deviceRange = 0
        case directTokens = 1

        public init(_ kind: WorkChunk.Kind) { self = kind == .deviceRange ? .deviceRange : .directTokens }
    }

    /// `chunk.kind`: 0 device range, 1 direct tokens.
    public static func chunkKind(_ raw: Int64) -> WorkChunk.Kind {
        raw == ChunkKindCode.deviceRange.rawValue ? .deviceRange : .directTokens
    }

    /// The elements in their first order, each once.
    @inlinable
    public static func distinct<Element: Hashable>(_ elements: [Element]) -> [Element] {
        // Most requests name one group or none of the devices: no set to build.
        if elements.count < 2 { return elements }
        var seen = Set<Element>(minimumCapacity: elements.count)
        return elements.filter { seen.insert($0).inserted }
    }

    /// A device's state from its stored code (0 valid, anything else invalid).
    package static func deviceState(_ code: Int64) -> DeviceState { code == 0 ? .valid : .invalid }

    /// A device token read back from the database: its ``DeviceToken/storageKey``, written from a
    /// validated token (hex for APNs, `fcm:` and the registration token for FCM).
    public static func deviceToken(_ key: String) throws -> DeviceToken {
        do {
            return try DeviceToken(storageKey: key)
        } catch {
            throw StoreError.backend("stored device token is malformed: \(error.message)")
        }
    }
}
