import NIOCore
public import PushgateCore

/// Where a transport connects: a push service's host, or any `HOST:PORT` (a simulator, a proxy).
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`, `[IPv6]:PORT`, or `HOST` (port 443).
    public init(parsing text: String) throws(ValidationError) {
        func fail() -> ValidationError {
            ValidationError(
                code: .init("invalid_host"),
                field: "apns-host",
                message: "expected HOST:PORT, got \"\(text)\""
            )
        }
        var host = Substring(text)
        var port = 443
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw fail() }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { throw fail() }
                port = value
            }
        } else if let colon = host.lastIndex(of: ":"), host.filter({ $0 == ":" }).count == 1 {
            guard let value = Int(host[host.index(after: colon)...]) else { throw fail() }
            port = value
            host = host[..<colon]
        }
        guard !host.isEmpty, (1...65535).contains(port) else { throw fail() }
        self.init(host: String(host), port: port)
    }

    /// True for an IPv4 or IPv6 literal: such a host gets no SNI and is verified against the
    /// certificate's IP address SANs.
    public var isIPAddress: Bool {
        (try? SocketAddress(ipAddress: host, port: port)) != nil
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
