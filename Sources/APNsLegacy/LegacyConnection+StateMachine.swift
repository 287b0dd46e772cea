import DequeModule
public import NIOCore

/// The send window of one legacy gateway connection: which notifications it wrote, under which
/// identifier, and what becomes of them. Pure: no channel, no clock, no logging (STYLE §1).
///
/// The legacy protocol never confirms success. The gateway processes notifications in order and, at
/// the first bad one, sends one error response naming it and closes the connection, discarding
/// everything after it. So:
///
/// - **Error response** (any status but Shutdown): everything before the named identifier was
///   processed (delivered), the named one failed with the status, everything after it was discarded
///   and is resent, once, on another connection.
/// - **Shutdown (10)**: the identifier is the last one processed: it and everything before it were
///   delivered, everything after it is resent.
/// - **Delivery confirmation**: a notification also counts as delivered once `quietTime` has passed
///   since its bytes were handed to the socket while the connection stayed open with no error
///   response. Confirmation runs in send order, so a later notification is never confirmed before
///   an earlier one, and an error response can only name notifications not yet confirmed as long as
///   the gateway answers within the quiet time.
/// - **Connection lost without an error response**: the fate of everything unconfirmed is unknown;
///   it is resent. The gateway may have processed some of it, so these are the only duplicates the
///   sender can cause.
public struct LegacyConnectionStateMachine<Request: Sendable>: Sendable {
    struct Entry: Sendable {
        var identifier: UInt32
        var request: Request
        /// When the write carrying it completed; nil while it is still in our buffers.
        var writtenAt: NIODeadline?
    }

    enum State: Sendable, Hashable {
        case open
        /// An error response arrived: the gateway is closing; everything was handed out already.
        case answered
        case closed
    }

    /// What an error response means for the window.
    public struct ErrorResponseAction: Sendable {
        /// Processed by the gateway: delivered.
        public var delivered: [Request] = []
        /// The notification the status is about (nil for Shutdown, or when the identifier is not in
        /// the window).
        public var failed: (request: Request, status: LegacyErrorStatus)?
        /// Never processed (or, with an unknown identifier, of unknown fate): send again.
        public var resend: [Request] = []
        /// The identifier named no notification the window still held (answered after its quiet time,
        /// or not one of ours).
        public var identifierUnknown = false
    }

    public let quietTime: TimeAmount
    private var entries: Deque<Entry> = []
    private var nextIdentifier: UInt32
    private var state: State = .open

    /// - Parameter firstIdentifier: identifiers count up from here on this connection. Not 0: a
    ///   Shutdown naming 0 then means "nothing processed".
    public init(quietTime: TimeAmount, firstIdentifier: UInt32 = 1) {
        precondition(firstIdentifier != 0)
        self.quietTime = quietTime
        self.nextIdentifier = firstIdentifier
    }

    /// Notifications written and not yet confirmed, failed or handed back.
    public var unconfirmedCount: Int { entries.count }

    public var isOpen: Bool { state == .open }

    /// The identifier the next notification written will get.
    public var upcomingIdentifier: UInt32 { nextIdentifier }

    /// How many more notifications this connection can number before its identifiers would wrap
    /// (then it takes no new work and is retired).
    public var remainingIdentifiers: Int { Int(UInt32.max - nextIdentifier) }

    // MARK: Events

    /// Numbers `requests` for writing, in order. Returns the identifiers, one per request. Nothing is
    /// numbered once the connection is no longer open.
    public mutating func willWrite(_ requests: [Request]) -> [UInt32] {
        guard state == .open else { return [] }
        precondition(requests.count <= remainingIdentifiers, "identifiers would wrap")
        var identifiers: [UInt32] = []
        identifiers.reserveCapacity(requests.count)
        for request in requests {
            identifiers.append(nextIdentifier)
            entries.append(Entry(identifier: nextIdentifier, request: request, writtenAt: nil))
            nextIdentifier += 1
        }
        return identifiers
    }

    /// The write carrying everything up to and including `identifier` reached the socket at `now`:
    /// their quiet time starts.
    public mutating func writeCompleted(through identifier: UInt32, at now: NIODeadline) {
        guard let last = position(of: identifier) else { return }
        for index in 0...last where entries[index].writtenAt == nil {
            entries[index].writtenAt = now
        }
    }

    /// The periodic check: the notifications whose quiet time has passed on an open connection are
    /// delivered. Returns them, in send order.
    public mutating func tick(now: NIODeadline) -> [Request] {
        guard state == .open else { return [] }
        var delivered: [Request] = []
        while let first = entries.first, let writtenAt = first.writtenAt, writtenAt + quietTime <= now {
            delivered.append(entries.removeFirst().request)
        }
        return delivered
    }

    /// The gateway answered with an error response. After it the gateway closes the connection; a
    /// second response (a misbehaving gateway) changes nothing.
    public mutating func errorResponseReceived(status: LegacyErrorStatus, identifier: UInt32) -> ErrorResponseAction {
        guard state == .open else { return ErrorResponseAction() }
        state = .answered
        var action = ErrorResponseAction()
        let all = Array(entries)
        entries.removeAll()
        guard let index = position(of: identifier, in: all) else {
            // Not ours, or already confirmed by its quiet time: nothing in the window can be
            // attributed, so none of it is known to be processed. Resending risks duplicates;
            // not resending would risk loss.
            // A Shutdown naming 0 (nothing processed) or the notification just before the window
            // (everything in it unprocessed) is exact, not unknown.
            let justBefore = all.first.map { $0.identifier &- 1 }
            // An empty window has nothing to misattribute.
            action.identifierUnknown =
                !all.isEmpty && !(status == .shutdown && (identifier == 0 || identifier == justBefore))
            action.resend = all.map(\.request)
            return action
        }
        if status == .shutdown {
            action.delivered = all[...index].map(\.request)
            action.resend = all[(index + 1)...].map(\.request)
        } else {
            action.delivered = all[..<index].map(\.request)
            action.failed = (all[index].request, status)
            action.resend = all[(index + 1)...].map(\.request)
        }
        return action
    }

    /// The connection closed. Returns what is still unconfirmed: of unknown fate, to be sent again.
    public mutating func connectionClosed() -> [Request] {
        state = .closed
        defer { entries.removeAll() }
        return entries.map(\.request)
    }

    // MARK: Identifier arithmetic

    private func position(of identifier: UInt32) -> Int? {
        guard let head = entries.first?.identifier else { return nil }
        let offset = Int(identifier &- head)
        return offset < entries.count ? offset : nil
    }

    private func position(of identifier: UInt32, in all: [Entry]) -> Int? {
        guard let head = all.first?.identifier else { return nil }
        let offset = Int(identifier &- head)
        return offset < all.count ? offset : nil
    }
}
