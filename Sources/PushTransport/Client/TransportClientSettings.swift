package import NIOCore
package import NIOSSL

/// What every client's configuration says about its pool, under the same names, so that one place
/// turns it into the pool's configuration: where to connect and how (TLS), how many connections, how
/// long to wait, how often to resend, how long to drain on shutdown.
package protocol TransportClientSettings: Sendable {
    /// `TimeAmount` or `Duration`, as the configuration has it.
    associatedtype Interval: TransportInterval

    var endpoint: Endpoint { get }
    func makeTLSContext() throws -> NIOSSLContext
    var maximumConnections: Int { get }
    /// What one connection is taken to carry until one reports its own capacity.
    var assumedStreamsPerConnection: Int { get }
    var maximumQueuedRequests: Int { get }
    var connectTimeout: Interval { get }
    /// A request without its own deadline fails this long after it was submitted if it is still queued;
    /// once written, it waits this long for its answer from then (the connection's `answerTimeout`).
    var requestTimeout: Interval { get }
    var reconnectBaseDelay: Interval { get }
    var reconnectMaximumDelay: Interval { get }
    /// How many times a request that went back to the queue unanswered is sent again.
    var maximumResends: Int { get }
    var tickInterval: Interval { get }
    var shutdownGracePeriod: Interval { get }
    /// Threads of the event loop group the client creates when none is given.
    var eventLoopThreads: Int { get }
}

/// A span of time as a client's configuration writes it.
package protocol TransportInterval: Sendable {
    var timeAmount: TimeAmount { get }
}

extension TimeAmount: TransportInterval {
    package var timeAmount: TimeAmount { self }
}

extension Duration: TransportInterval {
    package var timeAmount: TimeAmount { TimeAmount(self) }
}

extension ConnectionPool.Configuration {
    package init(settings: some TransportClientSettings) throws {
        self.init(
            endpoint: settings.endpoint,
            tlsContext: try settings.makeTLSContext(),
            pool: .init(
                maximumConnections: settings.maximumConnections,
                reconnectBaseDelay: settings.reconnectBaseDelay.timeAmount,
                reconnectMaximumDelay: settings.reconnectMaximumDelay.timeAmount,
                maximumQueued: settings.maximumQueuedRequests
            ),
            connectTimeout: settings.connectTimeout.timeAmount,
            requestTimeout: settings.requestTimeout.timeAmount,
            maximumResends: settings.maximumResends,
            tickInterval: settings.tickInterval.timeAmount,
            assumedStreamsPerConnection: settings.assumedStreamsPerConnection
        )
    }
}
