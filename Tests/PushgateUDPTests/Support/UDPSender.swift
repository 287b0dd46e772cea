#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain blocking UDP socket that sends datagrams to 127.0.0.1, like `nc -u` or a backend would.
final class UDPSender {
    private let descriptor: CInt

    init() throws {
        #if canImport(Darwin)
        let type = SOCK_DGRAM
        #else
        let type = Int32(SOCK_DGRAM.rawValue)
        #endif
        descriptor = socket(AF_INET, type, 0)
        guard descriptor >= 0 else { throw SenderError(message: "socket() failed: errno \(errno)") }
        // A large send buffer so that a burst is limited by the receiver, not by this socket.
        var size: CInt = 4 << 20
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<CInt>.size))
    }

    deinit {
        close(descriptor)
    }

    func send(_ text: String, to port: Int) throws {
        try send(Array(text.utf8), to: port)
    }

    func send(_ bytes: [UInt8], to port: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(
                        descriptor,
                        raw.baseAddress,
                        raw.count,
                        0,
                        socketAddress,
                        socklen_t(MemoryLayout<sockaddr_in>.size)
                    )
                }
            }
        }
        guard sent == bytes.count else { throw SenderError(message: "sendto() failed: errno \(errno)") }
    }

    struct SenderError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
