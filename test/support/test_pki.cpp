#include "support/test_pki.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/wait.h>

namespace redlock::test {
namespace {

std::filesystem::path make_pki_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "redlock-pki-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("test_pki: mkdtemp failed");
  return pattern;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error(fmt::format("test_pki: cannot write {}", path.string()));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A new EC P-256 key and a request for it; quick to make, and accepted by every TLS 1.2+ stack.
constexpr std::string_view new_key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

constexpr std::string_view server_names =
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    "basicConstraints=CA:FALSE\n";

}  // namespace

test_pki::test_pki() : dir_(make_pki_dir()) {
  try {
    ca_ = make_ca("ca", "/CN=redlock test CA");
    other_ca_ = make_ca("other-ca", "/CN=untrusted test CA");
    const std::string now = "-days 3650";
    server_ = issue(ca_, "server", "/CN=localhost", std::string(server_names), now);
    server_of_other_ca_ =
        issue(other_ca_, "server-other-ca", "/CN=localhost", std::string(server_names), now);
    server_wrong_name_ = issue(ca_, "server-wrong-name", "/CN=elsewhere.example",
                               "subjectAltName=DNS:elsewhere.example\n"
                               "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
                               now);
    server_expired_ = issue(ca_, "server-expired", "/CN=localhost", std::string(server_names),
                            "-startdate 20200101000000Z -enddate 20200201000000Z");
    client_ = issue(ca_, "client", "/CN=redlock test client",
                    "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n", now);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

const test_pki& shared_test_pki() {
  static const test_pki pki;
  return pki;
}

test_pki::~test_pki() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void test_pki::openssl(const std::string& arguments) const {
  const auto log = dir_ / "openssl.log";
  const std::string command =
      fmt::format("cd '{}' && openssl {} >'{}' 2>&1", dir_.string(), arguments, log.string());
  const int status = std::system(command.c_str());
  if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(
        fmt::format("test_pki: \"openssl {}\" failed:\n{}", arguments, read_file(log)));
  }
}

test_pki::identity test_pki::make_ca(const std::string& name, const std::string& subject) {
  identity ca{dir_ / (name + ".pem"), dir_ / (name + ".key")};
  openssl(fmt::format(
      "req -x509 {} -keyout {}.key -out {}.pem -days 3650 -subj '{}' "
      "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
      new_key, name, name, subject));
  // `openssl ca` keeps a database of what each CA issued; with -rand_serial the serial file is
  // named but not needed.
  write_file(dir_ / (name + ".index"), "");
  write_file(dir_ / (name + ".cnf"),
             fmt::format("[ca]\ndefault_ca = this_ca\n"
                         "[this_ca]\ndatabase = {0}.index\nserial = {0}.serial\nnew_certs_dir = .\n"
                         "default_md = sha256\n"
                         "policy = any_subject\nunique_subject = no\ncopy_extensions = none\n"
                         "[any_subject]\ncommonName = supplied\n",
                         name));
  return ca;
}

test_pki::identity test_pki::issue(const identity& issuer, const std::string& name,
                                   const std::string& subject, const std::string& extensions,
                                   const std::string& validity) {
  identity result{dir_ / (name + ".pem"), dir_ / (name + ".key")};
  openssl(fmt::format("req -new {} -keyout {}.key -out {}.csr -subj '{}'", new_key, name, name,
                      subject));
  write_file(dir_ / (name + ".ext"), extensions);
  const std::string issuer_name = issuer.cert.stem().string();
  // `openssl ca` (rather than `x509 -req`) because only it can back-date a certificate, which the
  // expired one needs.
  openssl(fmt::format(
      "ca -batch -notext -rand_serial -config {0}.cnf -cert {0}.pem -keyfile {0}.key -in {1}.csr "
      "-out {1}.pem -extfile {1}.ext {2}",
      issuer_name, name, validity));
  return result;
}

}  // namespace redlock::test
