package import NIOCore
package import NIOPosix
package import NIOSSL
import Synchronization

/// The one way every transport opens a connection: TCP with a connect timeout and no Nagle delay,
/// then TLS with SNI (none for an IP literal, which is verified against the certificate's IP SANs).
package enum TransportBootstrap {
    package static func make(group: any EventLoopGroup, connectTimeout: TimeAmount) -> ClientBootstrap {
        ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
    }

    /// Adds the TLS client handler first in `channel`'s pipeline. Call on the channel's event loop.
    package static func addTLS(to channel: any Channel, endpoint: Endpoint, context: NIOSSLContext) throws {
        let tls = try NIOSSLClientHandler(context: context, serverHostname: endpoint.isIPAddress ? nil : endpoint.host)
        try channel.pipeline.syncOperations.addHandler(tls)
    }
}

/// Whether the service can be reached, as far as connection attempts tell: the last attempt failed
/// (and none succeeded since) means no. Before any attempt, and while a connection is up, yes.
package final class Reachability: Sendable {
    private let lastAttemptFailed = Atomic<Bool>(false)

    package init() {}

    package var isReachable: Bool { !lastAttemptFailed.load(ordering: .relaxed) }

    package func connected() { lastAttemptFailed.store(false, ordering: .relaxed) }
    package func failed() { lastAttemptFailed.store(true, ordering: .relaxed) }
}
