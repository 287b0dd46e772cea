#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A range of IP addresses in CIDR notation: `10.0.0.0/8`, `2001:db8::/32`; a bare address is a range
/// of one (`192.0.2.7` is `192.0.2.7/32`). What `udp.allow` lists: the senders the UDP ports accept.
///
/// A value: parsing and matching read no clock, no resolver, no socket.
public struct CIDRRange: Hashable, Sendable, CustomStringConvertible {
    /// The network address, 4 bytes (IPv4) or 16 (IPv6), with every bit past the prefix zero.
    public let network: [UInt8]
    /// How many leading bits of an address must equal the network's (0 to 32, or 0 to 128).
    public let prefixLength: Int

    public var isIPv4: Bool { network.count == 4 }

    /// 127.0.0.0/8 and ::1/128: the default of `udp.allow` when the UDP ports listen on loopback.
    public static let loopback: [CIDRRange] = [
        CIDRRange(network: [127, 0, 0, 0], prefixLength: 8),
        CIDRRange(network: Array(repeating: 0, count: 15) + [1], prefixLength: 128),
    ]

    private init(network: [UInt8], prefixLength: Int) {
        self.network = network
        self.prefixLength = prefixLength
    }

    /// Parses `ADDRESS` or `ADDRESS/PREFIX`. An address with bits set past its prefix (`10.1.2.3/8`) is
    /// refused rather than silently widened: it is usually a typo for a narrower range.
    public init(parsing text: String) throws(CIDRRangeError) {
        let trimmed = text.trimmingWhitespace()
        let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let addressText = String(parts[0])
        let isIPv6 = addressText.contains(":")
        guard let address = Self.parseAddress(addressText, ipv6: isIPv6) else {
            throw CIDRRangeError(text: text, "\"\(addressText)\" is not an IPv4 or IPv6 address")
        }
        let maximum = address.count * 8
        var prefix = maximum
        if parts.count == 2 {
            let digits = parts[1]
            guard !digits.isEmpty, digits.utf8.count <= 3, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                let value = Int(digits), value <= maximum
            else {
                throw CIDRRangeError(text: text, "the prefix length must be 0 to \(maximum)")
            }
            prefix = value
        }
        let range = CIDRRange(network: Self.masked(address, prefix), prefixLength: prefix)
        guard range.network == address else {
            throw CIDRRangeError(text: text, "bits are set past the /\(prefix) prefix (did you mean \(range)?)")
        }
        self = range
    }

    /// True when `address` (4 or 16 bytes, network order) is in the range. An IPv4-mapped IPv6 address
    /// (`::ffff:192.0.2.7`, how a dual-stack socket reports an IPv4 sender) matches IPv4 ranges.
    public func contains<Address: Collection<UInt8>>(_ address: Address) -> Bool {
        containsAddress(address)
    }

    /// ``contains(_:)`` of raw bytes, specialised here: the UDP ingress asks it of every datagram, and the
    /// generic one, called from another module, went through the collection's witness table byte by byte.
    public func contains(_ address: UnsafeRawBufferPointer) -> Bool {
        containsAddress(address)
    }

    private func containsAddress<Address: Collection<UInt8>>(_ address: Address) -> Bool {
        if address.count == network.count { return matches(address) }
        if isIPv4, address.count == 16 {
            // ::ffff:a.b.c.d
            var index = address.startIndex
            for position in 0..<12 {
                let expected: UInt8 = position < 10 ? 0 : 0xFF
                guard address[index] == expected else { return false }
                index = address.index(after: index)
            }
            return matches(address[index...])
        }
        return false
    }

    private func matches<Address: Collection<UInt8>>(_ address: Address) -> Bool {
        var remaining = prefixLength
        for (byte, networkByte) in zip(address, network) {
            guard remaining > 0 else { return true }
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            guard byte & mask == networkByte else { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = isIPv4 ? AF_INET : AF_INET6
        let text = network.withUnsafeBytes { bytes in
            inet_ntop(family, bytes.baseAddress, &buffer, socklen_t(buffer.count)) != nil
                ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        }
        return "\(text)/\(prefixLength)"
    }

    /// inet_pton: dotted quads only for IPv4 (no `10.1`, no octal), RFC 4291 text for IPv6 (no zone).
    private static func parseAddress(_ text: String, ipv6: Bool) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: ipv6 ? 16 : 4)
        let status = bytes.withUnsafeMutableBytes { inet_pton(ipv6 ? AF_INET6 : AF_INET, text, $0.baseAddress) }
        return status == 1 ? bytes : nil
    }

    private static func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let bits = prefix - index * 8
            if bits >= 8 { return byte }
            if bits <= 0 { return 0 }
            return byte & ~(0xFF >> UInt8(bits))
        }
    }
}

/// A CIDR range that does not parse: the text and what is wrong with it.
public struct CIDRRangeError: Error, Hashable, Sendable, CustomStringConvertible {
    public let text: String
    public let message: String

    init(text: String, _ message: String) {
        self.text = text
        self.message = message
    }

    public var description: String { "\"\(text)\" is not a CIDR range: \(message)" }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        String(self.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
