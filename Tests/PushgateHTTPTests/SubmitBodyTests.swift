import Foundation
import PushgateCore
import Testing

@testable import PushgateHTTP

@Suite("SubmitBody (pure): the 202 body written directly")
struct SubmitBodyTests {
    @Test(
        "the direct bytes are the encoder's, for every kind of id the API makes or accepts",
        arguments: [
            ("019a8f3c2b1d0123456789abcdef", 1), ("a", 0), ("A.b_c-D.9", 1_000_000), ("x", Int.max),
            (String(repeating: "z", count: RequestID.maximumLength), 42),
        ]
    )
    func sameBytesAsTheEncoder(id: String, targets: Int) throws {
        let body = SubmitBody(id: try RequestID(id).value, targets: targets)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(body.json == Array(try encoder.encode(body)))
    }

    @Test("a generated id too")
    func generatedID() throws {
        let body = SubmitBody(id: RequestID.generate(at: Date()).value, targets: 3)
        let decoded = try JSONSerialization.jsonObject(with: Data(body.json)) as? [String: Any]
        #expect(decoded?["id"] as? String == body.id)
        #expect(decoded?["targets"] as? Int == 3)
        #expect(decoded?.count == 2)
    }
}
