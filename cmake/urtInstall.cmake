# Install rules and package files for urt: the library, its public headers, a
# CMake package (urtConfig.cmake, urtConfigVersion.cmake, urtTargets.cmake,
# urtDependencies.cmake in <libdir>/cmake/urt) and a pkg-config file
# (<libdir>/pkgconfig/urt.pc). Both package files are relocatable: they find
# the prefix from their own location, so `cmake --install --prefix X` works
# whatever prefix the build was configured with.
#
# Components: urt_runtime (the shared library, when BUILD_SHARED_LIBS) and
# urt_development (everything else). tests/integration installs exactly these
# two, so install rules that other targets may add do not get in its way.
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(URT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/urt")
set(URT_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

install(TARGETS urt EXPORT urtTargets
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT urt_runtime
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT urt_runtime
          NAMELINK_COMPONENT urt_development
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT urt_development)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/urt"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT urt_development
        FILES_MATCHING PATTERN "*.hpp")

# The pkg-config modules urt needs with their minimum versions, read from the
# pkg_check_modules() calls of urtDependencies.cmake (the one place that
# states them): "hwloc>=2.5;liburcu-qsbr>=0.13;...".
function(_urt_pkg_config_modules out)
  file(STRINGS "${PROJECT_SOURCE_DIR}/cmake/urtDependencies.cmake" lines
       REGEX "^[ \t]*pkg_check_modules\\(.*IMPORTED_TARGET")
  set(modules "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^.*IMPORTED_TARGET[ \t]+(GLOBAL[ \t]+)?([^)]*)\\).*$" "\\2" spec
           "${line}")
    string(STRIP "${spec}" spec)
    string(REGEX REPLACE "[ \t]+" ";" spec "${spec}")
    list(APPEND modules ${spec})
  endforeach()
  if(NOT modules)
    message(FATAL_ERROR "urtInstall.cmake: no pkg_check_modules(... IMPORTED_TARGET ...) call "
                        "found in cmake/urtDependencies.cmake to derive urt.pc's Requires from")
  endif()
  set(${out} "${modules}" PARENT_SCOPE)
endfunction()

# --- CMake package --------------------------------------------------------
function(_urt_install_cmake_package)  # urtConfig.cmake.in uses URT_PKG_CONFIG_MODULES
  configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/urtConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/urtConfig.cmake"
    INSTALL_DESTINATION "${URT_INSTALL_CMAKEDIR}")
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/urtConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMajorVersion)
  install(EXPORT urtTargets NAMESPACE urt:: DESTINATION "${URT_INSTALL_CMAKEDIR}"
          COMPONENT urt_development)
  install(FILES "${PROJECT_BINARY_DIR}/urtConfig.cmake"
                "${PROJECT_BINARY_DIR}/urtConfigVersion.cmake"
                "${PROJECT_SOURCE_DIR}/cmake/urtDependencies.cmake"
          DESTINATION "${URT_INSTALL_CMAKEDIR}" COMPONENT urt_development)
endfunction()

# --- pkg-config -----------------------------------------------------------
function(_urt_install_pkg_config_file)
  set(requires "")
  foreach(spec IN LISTS URT_PKG_CONFIG_MODULES)
    string(REGEX REPLACE "(>=|<=|=|<|>)" " \\1 " spec "${spec}")  # "hwloc >= 2.5"
    list(APPEND requires "${spec}")
  endforeach()
  list(JOIN requires ", " requires)

  # A shared liburt.so records its dependencies (DT_NEEDED), so a consumer
  # links -lurt alone: Requires.private. A static liburt.a does not, and the
  # consumer has to link hwloc and liburcu itself whether or not it passes
  # --static: Requires (Libs.private would only serve `pkg-config --static`).
  get_target_property(type urt TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    set(URT_PC_REQUIRES "${requires}")
    set(URT_PC_REQUIRES_PRIVATE "")
  else()
    set(URT_PC_REQUIRES "")
    set(URT_PC_REQUIRES_PRIVATE "${requires}")
  endif()

  # The prefix relative to the .pc file (pkg-config's ${pcfiledir}), unless
  # the install directories were given as absolute paths.
  if(IS_ABSOLUTE "${URT_INSTALL_PKGCONFIGDIR}")
    set(URT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH up "/p/${URT_INSTALL_PKGCONFIGDIR}" "/p")  # "../.."
    string(REGEX REPLACE "/$" "" up "${up}")
    set(URT_PC_PREFIX "\${pcfiledir}/${up}")
  endif()
  foreach(dir IN ITEMS LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(URT_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(URT_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()

  configure_file("${PROJECT_SOURCE_DIR}/cmake/urt.pc.in" "${PROJECT_BINARY_DIR}/urt.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/urt.pc" DESTINATION "${URT_INSTALL_PKGCONFIGDIR}"
          COMPONENT urt_development)
endfunction()

_urt_pkg_config_modules(URT_PKG_CONFIG_MODULES)
_urt_install_cmake_package()
_urt_install_pkg_config_file()
