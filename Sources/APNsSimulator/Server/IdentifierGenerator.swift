/// Generates random (version 4) UUID strings quickly, for `apns-id` and `apns-unique-id`.
/// One per connection, so it needs no lock.
struct IdentifierGenerator {
    private var random = SplitMix64()

    init() {}

    /// An 8-4-4-4-12 UUID string, uppercase as APNs writes its generated `apns-id`s.
    mutating func uppercaseUUID() -> String {
        self.uuid(letterBase: UInt8(ascii: "A") - 10)
    }

    /// An 8-4-4-4-12 UUID string in lowercase.
    mutating func lowercaseUUID() -> String {
        self.uuid(letterBase: UInt8(ascii: "a") - 10)
    }

    private mutating func uuid(letterBase: UInt8) -> String {
        var high = self.random.next()
        var low = self.random.next()
        // Version 4, variant 10.
        high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for nibbleIndex in 0..<32 {
                if nibbleIndex == 8 || nibbleIndex == 12 || nibbleIndex == 16 || nibbleIndex == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibbleIndex < 16 ? high : low
                let shift = UInt64(60 - 4 * (nibbleIndex % 16))
                let nibble = UInt8((word >> shift) & 0xF)
                buffer[position] = nibble < 10 ? UInt8(ascii: "0") + nibble : letterBase + nibble
                position += 1
            }
            return position
        }
    }
}
