import Logging
import NIOCore
import PostgresNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// TCP keepalive and a bound on unacknowledged data for the store's connections, so that the kernel
/// notices a peer that vanished without a word (a host that lost power, a NAT that forgot the
/// connection, a network dropping every packet) and closes the connection: the work listener waits
/// on its connection with nothing to send, and only keepalive probes can tell it that the server is
/// gone; a connection with data in flight gives up after ``userTimeout`` instead of TCP's default
/// (about 15 minutes of retransmissions).
///
/// postgres-nio 1.33.2 exposes no socket options (neither `PostgresClient.Configuration` nor
/// `PostgresConnection.Configuration`, and the connection's channel is internal), so the options are
/// set on each connection's channel, found by reflection, the first time the store leases it. If a
/// later postgres-nio renames the property, nothing is set and the store says so once, at `notice`
/// level; ``PostgresStoreKeepaliveTests`` fails then.
final class ConnectionKeepalive: Sendable {
    /// Idle time before the first probe.
    static let idle = 15
    /// Between probes.
    static let interval = 5
    /// Unanswered probes before the kernel closes the connection.
    static let probes = 3
    /// How long sent data may stay unacknowledged, in milliseconds (`TCP_USER_TIMEOUT`); with keepalive
    /// on, also when unanswered probes end the connection: idle + interval × probes.
    static let userTimeoutMilliseconds = (idle + interval * probes) * 1000

    private let configured = Mutex<Set<ObjectIdentifier>>([])
    private let warned = Atomic<Bool>(false)

    /// Sets the options on `connection`'s socket unless done before (one look-up in a set otherwise).
    func configure(_ connection: PostgresConnection, logger: Logger) async {
        let key = ObjectIdentifier(connection)
        guard configured.withLock({ $0.insert(key).inserted }) else { return }
        connection.closeFuture.whenComplete { _ in _ = self.configured.withLock { $0.remove(key) } }
        guard let channel = connection.channelByReflection else {
            if !warned.exchange(true, ordering: .relaxed) {
                logger.notice("cannot set TCP keepalive on PostgreSQL connections (postgres-nio changed)")
            }
            return
        }
        do {
            for (option, value) in Self.options {
                try await channel.setOption(option, value: value).get()
            }
        } catch {
            // A connection closed meanwhile, or a socket that is not TCP (a Unix socket): nothing to keep alive.
            logger.debug("TCP keepalive not set", metadata: ["store.error": "\(error)"])
        }
    }

    static var options: [(ChannelOptions.Types.SocketOption, SocketOptionValue)] {
        var options: [(ChannelOptions.Types.SocketOption, SocketOptionValue)] = [
            (.init(level: .socket, name: .so_keepalive), 1)
        ]
        #if os(Linux)
        func tcp(_ name: CInt) -> ChannelOptions.Types.SocketOption { .init(level: .tcp, name: .init(rawValue: name)) }
        options += [
            (tcp(CInt(TCP_KEEPIDLE)), SocketOptionValue(idle)),
            (tcp(CInt(TCP_KEEPINTVL)), SocketOptionValue(interval)),
            (tcp(CInt(TCP_KEEPCNT)), SocketOptionValue(probes)),
            (tcp(CInt(TCP_USER_TIMEOUT)), SocketOptionValue(userTimeoutMilliseconds)),
        ]
        #endif
        return options
    }
}

extension PostgresConnection {
    /// The connection's NIO channel (an internal stored property of postgres-nio's), nil if not found.
    var channelByReflection: (any Channel)? {
        Mirror(reflecting: self).children.first { $0.label == "channel" }?.value as? any Channel
    }
}
