import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves the listen host to every address it names, as the C pushd does (`localhost` is usually
/// both 127.0.0.1 and ::1), in the resolver's order, without duplicates.
enum ListenAddresses {
    static func resolve(_ host: String) throws(UDPIngressError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_DGRAM
        #else
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        #endif
        hints.ai_flags = AI_PASSIVE
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else {
            let detail = status == 0 ? "no address" : String(cString: gai_strerror(status))
            throw .unresolvableHost(host, detail: detail)
        }
        defer { freeaddrinfo(first) }

        var addresses: [SocketAddress] = []
        var seen = Set<String>()
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            defer { entry = current.pointee.ai_next }
            guard let raw = current.pointee.ai_addr else { continue }
            let address: SocketAddress
            switch current.pointee.ai_family {
            case AF_INET:
                let ipv4 = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                address = SocketAddress(ipv4, host: host)
            case AF_INET6:
                let ipv6 = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                address = SocketAddress(ipv6, host: host)
            default:
                continue
            }
            if let ip = address.ipAddress, seen.insert(ip).inserted { addresses.append(address) }
        }
        guard !addresses.isEmpty else { throw .unresolvableHost(host, detail: "no IPv4 or IPv6 address") }
        return addresses
    }
}
