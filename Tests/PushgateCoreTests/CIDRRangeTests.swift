import PushgateCore
import Testing

@Suite("CIDR ranges (udp.allow)")
struct CIDRRangeTests {
    static func bytes(_ ipv4: UInt8...) -> [UInt8] { ipv4 }
    static let mappedPrefix: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF]

    @Test("IPv4 ranges contain exactly the addresses under their prefix")
    func ipv4() throws {
        let range = try CIDRRange(parsing: "10.20.0.0/14")
        #expect(range.description == "10.20.0.0/14")
        #expect(range.isIPv4 && range.prefixLength == 14)
        #expect(range.contains(Self.bytes(10, 20, 0, 1)))
        #expect(range.contains(Self.bytes(10, 23, 255, 255)))
        #expect(!range.contains(Self.bytes(10, 24, 0, 0)))
        #expect(!range.contains(Self.bytes(10, 19, 255, 255)))
        #expect(!range.contains(Array(repeating: UInt8(0), count: 16)), "an IPv6 address is not in an IPv4 range")
    }

    @Test("a bare address is a range of one; /0 is everything of its family")
    func edges() throws {
        let one = try CIDRRange(parsing: "192.0.2.7")
        #expect(one.description == "192.0.2.7/32")
        #expect(one.contains(Self.bytes(192, 0, 2, 7)) && !one.contains(Self.bytes(192, 0, 2, 6)))
        let all = try CIDRRange(parsing: " 0.0.0.0/0 ")
        #expect(all.contains(Self.bytes(203, 0, 113, 9)))
        let all6 = try CIDRRange(parsing: "::/0")
        #expect(all6.contains(Array(repeating: UInt8(0xAB), count: 16)))
        #expect(!all6.contains(Self.bytes(1, 2, 3, 4)))
        let one6 = try CIDRRange(parsing: "::1")
        #expect(one6.description == "::1/128")
    }

    @Test("IPv6 ranges; an IPv4-mapped IPv6 sender matches IPv4 ranges")
    func ipv6() throws {
        let range = try CIDRRange(parsing: "2001:db8:ab00::/40")
        #expect(!range.isIPv4 && range.description == "2001:db8:ab00::/40")
        var inside: [UInt8] = [0x20, 0x01, 0x0D, 0xB8, 0xAB, 0xCD] + Array(repeating: 0, count: 10)
        #expect(range.contains(inside))
        inside[4] = 0xAC
        #expect(!range.contains(inside))

        let loopback = try CIDRRange(parsing: "127.0.0.0/8")
        #expect(loopback.contains(Self.mappedPrefix + [127, 0, 0, 1]))
        #expect(!loopback.contains(Self.mappedPrefix + [128, 0, 0, 1]))
        #expect(!loopback.contains(Array(repeating: 0, count: 12) + [127, 0, 0, 1]), "only ::ffff: maps IPv4")
    }

    @Test("the loopback default covers 127.0.0.0/8 and ::1 only")
    func loopbackDefault() {
        let ranges = CIDRRange.loopback
        func allowed(_ address: [UInt8]) -> Bool { ranges.contains { $0.contains(address) } }
        #expect(allowed([127, 1, 2, 3]))
        #expect(allowed(Array(repeating: 0, count: 15) + [1]))
        #expect(!allowed([10, 0, 0, 1]))
        #expect(!allowed(Array(repeating: 0, count: 15) + [2]))
    }

    @Test(
        "bad text is refused with the reason",
        arguments: [
            ("10.0.0.0/33", "prefix length must be 0 to 32"),
            ("::/129", "prefix length must be 0 to 128"),
            ("10.0.0.0/", "prefix length"),
            ("10.0.0.0/+8", "prefix length"),
            ("10.0.0.0/8/8", "prefix length"),
            ("10.1.2.3/8", "did you mean 10.0.0.0/8?"),
            ("2001:db8::1/32", "did you mean 2001:db8::/32?"),
            ("10.0.0", "not an IPv4 or IPv6 address"),
            ("256.0.0.1", "not an IPv4 or IPv6 address"),
            ("localhost", "not an IPv4 or IPv6 address"),
            ("fe80::1%eth0", "not an IPv4 or IPv6 address"),
            ("", "not an IPv4 or IPv6 address"),
        ]
    )
    func refused(text: String, reason: String) {
        #expect {
            _ = try CIDRRange(parsing: text)
        } throws: { error in
            "\(error)".contains(reason) && "\(error)".contains("\"\(text)\" is not a CIDR range")
        }
    }
}
