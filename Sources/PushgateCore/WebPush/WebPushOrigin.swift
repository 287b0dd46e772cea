/// The origin of a push resource (RFC 6454): `https://host` or `https://host:port`, the unit that
/// shares connections and a VAPID token (`aud`). The host is lower-cased and the default port (443)
/// left out, so two endpoints of one push service always have the same origin.
public struct WebPushOrigin: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The host as a URL writes it: a name, an IPv4 address, or an IPv6 address in brackets.
    public let host: String
    public let port: Int

    package init(host: String, port: Int) {
        self.host = host.lowercased()
        self.port = port
    }

    /// `https://host[:port]`: the VAPID `aud` claim of every message sent to this origin.
    public var serialized: String { port == 443 ? "https://\(host)" : "https://\(host):\(port)" }

    /// The host for connecting: without the brackets of an IPv6 address.
    public var connectHost: String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    public var description: String { serialized }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.serialized < rhs.serialized }
}
