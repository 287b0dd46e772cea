import Foundation
import Hummingbird

/// `GET /openapi.yaml`: the OpenAPI 3.1 description of this API, shipped as a resource of the target
/// (`Resources/openapi.yaml`) and read once.
enum OpenAPIDocument {
    /// The document's bytes; nil if the resource is missing from the build (a packaging bug).
    static let bytes: [UInt8]? = Bundle.module.url(forResource: "openapi", withExtension: "yaml")
        .flatMap { try? Data(contentsOf: $0) }.map { Array($0) }

    static func response() throws -> Response {
        guard let bytes else { throw OpenAPIDocumentMissing() }
        return Response(
            status: .ok,
            headers: [.contentType: "application/yaml; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    struct OpenAPIDocumentMissing: Error, CustomStringConvertible {
        var description: String { "openapi.yaml is missing from the PushgateHTTP resource bundle" }
    }
}
