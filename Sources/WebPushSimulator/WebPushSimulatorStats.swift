/// Counters of what the simulator saw.
public struct WebPushSimulatorStats: Sendable, Hashable {
    /// Push requests, all answers included.
    public var requests = 0
    /// Answered 201.
    public var delivered = 0
    /// Answered otherwise (refused by a check, or scripted), by status; dropped connections count as 0.
    public var answeredByStatus: [Int: Int] = [:]
    /// Requests that came over HTTP/2 and HTTP/1.1.
    public var http2Requests = 0
    public var http1Requests = 0
    /// Subscriptions delivered to at least once, and 201s to a subscription delivered to before.
    public var subscriptionsDelivered = 0
    public var duplicates = 0
    /// Push requests checked (VAPID, decryption) on a worker thread (``WebPushSimulator/Configuration/workerThreads``).
    public var checkedOnWorkers = 0
    /// Messages decrypted (every one in the checking mode, a sample with
    /// ``WebPushSimulator/Configuration/decryptEvery`` above 1), and VAPID signatures verified.
    public var decrypted = 0
    public var tokensVerified = 0
}
