package import NIOCore
package import PushTransport
package import PushgateCore

/// The header block of one `messages:send` request, HPACK-encoded with the connection's encoder
/// (the shared `HPACKRequestEncoder`, as for APNs).
///
/// What every request of a connection repeats (`:path` for the project, `:authority`,
/// `content-type`) is indexed, so from the second request on it costs one byte each. The bearer
/// token is a literal without indexing (it changes hourly and is a secret: it stays out of the tables),
/// and so is `content-length`, which changes per message.
package struct FCMRequestHeaders: Sendable {
    /// `host` or `host:port`.
    package let authority: String
    package let path: String

    package init(authority: String, projectID: String) {
        self.authority = authority
        self.path = Self.path(projectID: projectID)
    }

    package static func path(projectID: String) -> String {
        "/v1/projects/\(projectID)/messages:send"
    }

    package static let contentType = "application/json; charset=UTF-8"

    /// Writes the block (not the frame header) for a body of `contentLength` bytes.
    package func write(
        accessToken: FCMAccessToken,
        contentLength: Int,
        encoder: inout HPACKRequestEncoder,
        into buffer: inout ByteBuffer
    ) {
        encoder.writePendingSizeUpdate(into: &buffer)
        // `:method POST` and `:scheme https` are static-table entries 3 and 7.
        buffer.writeMultipleIntegers(0x83 as UInt8, 0x87 as UInt8)
        encoder.writeIndexable(name: ":path", value: path, into: &buffer)
        encoder.writeIndexable(name: ":authority", value: authority, into: &buffer)
        encoder.writeIndexable(name: "content-type", value: Self.contentType, into: &buffer)
        HPACKRequestEncoder.writeNotIndexed(
            staticNameIndex: HPACKRequestEncoder.StaticName.authorization,
            value: accessToken.authorizationHeaderValue,
            into: &buffer
        )
        HPACKRequestEncoder.writeNotIndexed(name: "content-length", value: String(contentLength), into: &buffer)
    }
}
