import Foundation
import Hummingbird

/// JSON answers.
enum JSONResponse {
    static func make(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.format(date))
        }
        // Encoding our own response types cannot fail (no non-finite floats, no failing encode(to:)).
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return make(bytes: data, status: status)
    }

    /// A JSON answer whose body is already encoded.
    static func make(bytes: some Sequence<UInt8>, status: HTTPResponse.Status) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }
}

/// RFC 3339 UTC timestamps with milliseconds: `2027-01-15T08:00:00.000Z`.
enum Timestamp {
    static func format(_ date: Date) -> String {
        date.formatted(
            Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)
        )
    }
}
