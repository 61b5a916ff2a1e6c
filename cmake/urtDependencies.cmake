# Finds urt's dependencies and defines the imported targets urt links to.
# Used by the build itself and, installed beside urtConfig.cmake, by
# consumers of the installed package, so both see the same targets.
include(CMakeFindDependencyMacro)

find_dependency(Threads)
find_dependency(PkgConfig)
pkg_check_modules(URT_HWLOC REQUIRED IMPORTED_TARGET GLOBAL hwloc>=2.5)
pkg_check_modules(URT_URCU_QSBR REQUIRED IMPORTED_TARGET GLOBAL liburcu-qsbr>=0.13)

# Asio (libasio-dev) is standalone and header-only, with neither a CMake
# package nor a .pc file: find the header and check the version it declares.
if(NOT TARGET urt::asio)
  find_path(URT_ASIO_INCLUDE_DIR asio.hpp REQUIRED)
  file(STRINGS "${URT_ASIO_INCLUDE_DIR}/asio/version.hpp" _urt_asio_version
       REGEX "^#define ASIO_VERSION [0-9]+")
  string(REGEX REPLACE ".*ASIO_VERSION ([0-9]+).*" "\\1" _urt_asio_version "${_urt_asio_version}")
  if(_urt_asio_version LESS 101800)
    message(FATAL_ERROR "urt needs Asio >= 1.18 (found ASIO_VERSION ${_urt_asio_version} "
                        "in ${URT_ASIO_INCLUDE_DIR})")
  endif()
  add_library(urt::asio INTERFACE IMPORTED GLOBAL)
  # Only the include directory: urt builds with Asio's default
  # configuration (standalone Asio defines ASIO_STANDALONE itself), so a
  # consumer keeps whatever Asio API it uses, classic calls included, and
  # sees the same Asio types the library was built with (DESIGN.md,
  # "Dependencies and their traps").
  set_target_properties(urt::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${URT_ASIO_INCLUDE_DIR}")
endif()
